// Prints the production build's size and time, and fails when the initial
// JavaScript (what index.html loads before any lazy route) reaches 1.5 MB.
//   node scripts/size.mjs <dist/browser dir> <build seconds>
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const [dir, secs] = process.argv.slice(2);
const LIMIT = 1.5 * 1024 * 1024;
const html = readFileSync(join(dir, 'index.html'), 'utf8');
const initial = new Set([...html.matchAll(/(?:src|href)="([^"]+\.(?:js|css))"/g)].map((m) => m[1]));
let js = 0;
let css = 0;
for (const f of initial) {
  const n = statSync(join(dir, f)).size;
  if (f.endsWith('.js')) {
    js += n;
  } else {
    css += n;
  }
}
let total = 0;
for (const f of readdirSync(dir)) {
  if (/\.(js|css)$/.test(f)) {
    total += statSync(join(dir, f)).size;
  }
}
const kb = (n) => `${(n / 1024).toFixed(0)} KB`;
console.log(`   build: ${secs} s; initial JavaScript ${kb(js)} (limit ${kb(LIMIT)}), initial CSS ${kb(css)}, all JS+CSS ${kb(total)}`);
if (js >= LIMIT) {
  console.error(`test-ui: the initial JavaScript is ${kb(js)}, over the 1.5 MB limit: lazy-load the new code (routes) or drop a dependency`);
  process.exit(1);
}
