// Facts about the agent's TypeScript, read with the TypeScript compiler API, printed as JSON for
// tests/instrument/agent_ts.py:
//
//   node agent_ts.cjs protocol agent/src/common/protocol.ts agent/src/common/requests.ts
//     {"interfaces": {Name: {field: {"optional": bool, "type": T}}}, "aliases": {Name: T}, "consts": {Name: value}}
//     of all the files together (a `ref` may name a type of another of them; a name declared twice fails),
//     where T is {"kind": "string" | "number" | "boolean" | "unknown" | "null"}, {"kind": "literal", "values": [...]},
//     {"kind": "array", "of": T}, {"kind": "tuple", "items": [T]}, {"kind": "record", "value": T},
//     {"kind": "object", "fields": {...}}, {"kind": "ref", "name": N} or {"kind": "union", "of": [T]}.
//   node agent_ts.cjs layout agent/src/native/layout.ts
//     {"constants": {NAME: number}, "prelude": {"tsc": text, "plain": text}}: the module transpiled and run
//     (it is pure data), so the values and the C prelude are exactly what the agent computes.
//
// The typescript package comes from tests/toolchains/node_modules (TYPESCRIPT_DIR overrides it).

"use strict";

const fs = require("fs");
const path = require("path");

const ts = require(process.env.TYPESCRIPT_DIR || path.join(__dirname, "..", "toolchains", "node_modules", "typescript"));

function fail(node, message) {
  const file = node.getSourceFile();
  const { line } = file.getLineAndCharacterOfPosition(node.getStart());
  throw new Error(`${file.fileName}:${line + 1}: ${message}`);
}

function describeType(node) {
  switch (node.kind) {
    case ts.SyntaxKind.StringKeyword:
      return { kind: "string" };
    case ts.SyntaxKind.NumberKeyword:
      return { kind: "number" };
    case ts.SyntaxKind.BooleanKeyword:
      return { kind: "boolean" };
    case ts.SyntaxKind.UnknownKeyword:
    case ts.SyntaxKind.AnyKeyword:
      return { kind: "unknown" };
    case ts.SyntaxKind.ParenthesizedType:
      return describeType(node.type);
    case ts.SyntaxKind.LiteralType:
      if (node.literal.kind === ts.SyntaxKind.NullKeyword) {
        return { kind: "null" };
      }
      if (ts.isStringLiteral(node.literal) || ts.isNumericLiteral(node.literal)) {
        return { kind: "literal", values: [ts.isStringLiteral(node.literal) ? node.literal.text : Number(node.literal.text)] };
      }
      return fail(node, `unsupported literal type ${node.getText()}`);
    case ts.SyntaxKind.ArrayType:
      return { kind: "array", of: describeType(node.elementType) };
    case ts.SyntaxKind.TupleType:
      return { kind: "tuple", items: node.elements.map(describeType) };
    case ts.SyntaxKind.TypeLiteral:
      return { kind: "object", fields: describeMembers(node.members) };
    case ts.SyntaxKind.UnionType: {
      const members = node.types.map(describeType);
      if (members.every((m) => m.kind === "literal")) {
        return { kind: "literal", values: members.flatMap((m) => m.values) };
      }
      return { kind: "union", of: members };
    }
    case ts.SyntaxKind.TypeReference: {
      const name = node.typeName.getText();
      const args = node.typeArguments || [];
      if (name === "Record" && args.length === 2) {
        if (args[0].kind !== ts.SyntaxKind.StringKeyword) {
          fail(node, "only Record<string, T> is supported");
        }
        return { kind: "record", value: describeType(args[1]) };
      }
      if (name === "Array" && args.length === 1) {
        return { kind: "array", of: describeType(args[0]) };
      }
      if (args.length > 0) {
        fail(node, `unsupported generic type ${node.getText()}`);
      }
      return { kind: "ref", name };
    }
    default:
      return fail(node, `unsupported type ${node.getText()}`);
  }
}

function describeMembers(members) {
  const fields = {};
  for (const member of members) {
    if (!ts.isPropertySignature(member) || member.type === undefined) {
      fail(member, `only typed properties are supported in a message, not ${member.getText()}`);
    }
    const name = ts.isIdentifier(member.name) || ts.isStringLiteral(member.name) ? member.name.text : fail(member, "computed name");
    fields[name] = { optional: member.questionToken !== undefined, type: describeType(member.type) };
  }
  return fields;
}

function protocol(...files) {
  const out = { interfaces: {}, aliases: {}, consts: {} };
  const declared = new Set();
  const declare = (node, name) => {
    if (declared.has(name)) {
      fail(node, `${name} is declared in more than one of ${files.join(", ")}`);
    }
    declared.add(name);
    return name;
  };
  for (const file of files) {
    const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    for (const statement of source.statements) {
      if (ts.isInterfaceDeclaration(statement)) {
        if (statement.heritageClauses !== undefined || statement.typeParameters !== undefined) {
          fail(statement, "a message interface must not extend or take type parameters");
        }
        out.interfaces[declare(statement, statement.name.text)] = describeMembers(statement.members);
      } else if (ts.isTypeAliasDeclaration(statement)) {
        out.aliases[declare(statement, statement.name.text)] = describeType(statement.type);
      } else if (ts.isVariableStatement(statement)) {
        for (const declaration of statement.declarationList.declarations) {
          const init = declaration.initializer;
          if (init !== undefined && (ts.isNumericLiteral(init) || ts.isStringLiteral(init))) {
            const value = ts.isNumericLiteral(init) ? Number(init.text) : init.text;
            out.consts[declare(declaration, declaration.name.getText())] = value;
          }
        }
      }
    }
  }
  return out;
}

function layout(file) {
  const text = fs.readFileSync(file, "utf8");
  const { outputText, diagnostics } = ts.transpileModule(text, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
    fileName: file,
  });
  if (diagnostics !== undefined && diagnostics.length > 0) {
    throw new Error(`${file}: ${ts.flattenDiagnosticMessageText(diagnostics[0].messageText, "\n")}`);
  }
  const exports = {};
  new Function("exports", "require", outputText)(exports, () => {
    throw new Error(`${file} must not import anything: tests evaluate it on its own`);
  });
  const constants = {};
  for (const [name, value] of Object.entries(exports)) {
    if (typeof value === "number") {
      constants[name] = value;
    }
  }
  return { constants, cLayout: exports.C_LAYOUT, prelude: { tsc: exports.cPrelude(true), plain: exports.cPrelude(false) } };
}

const [command, ...files] = process.argv.slice(2);
const commands = { protocol, layout };
if (!(command in commands) || files.length === 0 || (command === "layout" && files.length !== 1)) {
  process.stderr.write("usage: node agent_ts.cjs protocol FILE.ts... | layout FILE.ts\n");
  process.exit(2);
}
process.stdout.write(JSON.stringify(commands[command](...files)) + "\n");
