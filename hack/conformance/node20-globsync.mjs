// Loaded with `node --import` before the MCP conformance suite's CLI. The suite declares
// node >= 22 and imports fs.globSync at module load, which node 20 lacks, so the CLI crashes
// before parsing its arguments; only its tier-check command calls the function. On a node
// without fs.globSync this hook serves the suite a copy of fs that adds a globSync which throws
// when called; on node >= 22 it does nothing.
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  const shim = 'tatara-shim:fs';
  const hooks = `
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== '${shim}') {
    return { url: '${shim}', shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (url === '${shim}') {
    return { format: 'module', shortCircuit: true, source:
      "import fs from 'node:fs'; export * from 'node:fs'; export default fs;" +
      "export function globSync() { throw new Error('fs.globSync needs node >= 22 (used by the conformance tier-check command only)'); }" };
  }
  return next(url, context);
}`;
  register('data:text/javascript,' + encodeURIComponent(hooks));
}
