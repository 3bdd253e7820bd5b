// GET the URL in argv[2] with Node's built-in fetch (which reads no proxy variables).
fetch(process.argv[2])
  .then((r) => r.text())
  .then(
    (t) => process.stdout.write(t),
    (e) => {
      console.error("node:", String(e.cause || e));
      process.exit(3);
    },
  );
