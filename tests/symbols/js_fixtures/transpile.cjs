// TypeScript → JavaScript with the TypeScript compiler's transpileModule (types removed, nothing checked):
// node transpile.cjs <typescript package dir> <input.ts> <output.js> [<input> <output> ...]
'use strict';
const fs = require('fs');
const ts = require(process.argv[2]);

for (let i = 3; i < process.argv.length; i += 2) {
  const source = fs.readFileSync(process.argv[i], 'utf8');
  const { outputText, diagnostics } = ts.transpileModule(source, {
    fileName: process.argv[i],
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      jsx: ts.JsxEmit.React,
    },
  });
  if (diagnostics.length) {
    console.error(diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'));
    process.exit(1);
  }
  fs.writeFileSync(process.argv[i + 1], outputText);
}
