// GET the URL in argv[2] with Node's built-in fetch (which reads no proxy variables); print
// the body.
// A reset socket can leave fetch's promise unsettled, and Node then exits 0 with nothing
// written; a download that never finished is a failure, so that case exits 4.
let settled = false;
process.on("exit", (code) => {
  if (!settled && code === 0) {
    console.error("node: the request never completed");
    process.exitCode = 4;
  }
});
// Any status but 200 is a failure: its status line and text go to stderr, exit 3.
fetch(process.argv[2])
  .then(async (r) => ({ r, t: await r.text() }))
  .then(
    ({ r, t }) => {
      settled = true;
      if (r.status !== 200) {
        console.error(`node: status ${r.status} ${r.statusText}\n${t}`);
        process.exit(3);
      }
      process.stdout.write(t);
    },
    (e) => {
      settled = true;
      console.error("node:", String(e.cause || e));
      process.exit(3);
    },
  );
