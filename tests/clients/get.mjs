// GET the URL in argv[2] with Node's built-in fetch (which reads no proxy variables).
// A reset socket can leave fetch's promise unsettled, and Node then exits 0 with nothing
// written; a download that never finished is a failure, so that case exits 4.
let settled = false;
process.on("exit", (code) => {
  if (!settled && code === 0) {
    console.error("node: the request never completed");
    process.exitCode = 4;
  }
});
fetch(process.argv[2])
  .then((r) => r.text())
  .then(
    (t) => {
      settled = true;
      process.stdout.write(t);
    },
    (e) => {
      settled = true;
      console.error("node:", String(e.cause || e));
      process.exit(3);
    },
  );
