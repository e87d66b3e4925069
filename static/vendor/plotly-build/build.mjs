// Builds ../plotly-frontier.min.js from entry.js with plotly.js's own esbuild
// settings (its esbuild-config.js and its dist bundles' wrapper, plotly.js 4.1.1)
// but one: `make vendor-plotly` runs it in a scratch copy of this folder after
// `npm ci`. esbuild's output is deterministic: the same lock file, the same bytes.
//
// The one difference: plotly.js inlines its map library's stylesheet (required
// by every bundle, used by map traces only) as a <style> it injects under an id
// hashed from the build machine's path to the file. This bundle has no map
// trace, so .css files load as nothing: 83 kB less, no <style> the site's
// Content Security Policy would refuse, and the bytes do not depend on the path.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as esbuild from 'esbuild';

const require = createRequire(import.meta.url);
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');

const out = process.argv[2];
const version = JSON.parse(readFileSync('node_modules/plotly.js/package.json', 'utf8')).version;
const traces = 'scatter, scattergl-strict, bar, heatmap';
// plotly.js's own header (its copyright and license), naming this bundle as its partial bundles do.
const header = readFileSync('node_modules/plotly.js/dist/plotly-cartesian.min.js', 'utf8').split('*/')[0]
    .replace('(cartesian - minified)', `(frontier: ${traces} - minified)`) + '*/\n';

const result = await esbuild.build({
    entryPoints: ['entry.js'],
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    legalComments: 'eof',
    plugins: [glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    loader: { '.css': 'empty' },
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    write: false,
    logLevel: 'warning',
});
const body = result.outputFiles[0].text;
if (!header.includes(`v${version}`)) throw new Error(`the header does not name plotly.js v${version}: ${header}`);
// The same wrapper as plotly.js's dist bundles: a global `Plotly` for classic <script> tags.
writeFileSync(out, `${header}(
 function(root, factory) {
  if (typeof module === "object" && module.exports) {
   module.exports = factory();
  } else {
   root.moduleName = factory();
  }
} (typeof self !== "undefined" ? self : this, () => {
${body}
window.Plotly = Plotly;
return Plotly;
}));
`);
console.log(`${out}: plotly.js ${version} (${traces}), ${readFileSync(out).length} bytes`);
