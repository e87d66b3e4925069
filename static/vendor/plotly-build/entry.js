// The trace types Frontier's pages draw (static/js/run/charts.js; compare.js
// draws plotly.py figures of scatter traces), nothing else. Built by build.mjs.
'use strict';

var Plotly = require('plotly.js/lib/core'); // with the scatter trace

Plotly.register([
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/heatmap'),
    // scattergl (a point chart past 1,000 points) in its strict variant, as in
    // plotly.js's strict bundle: its WebGL programs precompiled. The plain one
    // compiles some with `new Function`, which our Content Security Policy
    // refuses (no 'unsafe-eval'): with it the run page's score and 2-D front
    // charts read "WebGL is not supported by your browser".
    require('plotly.js/src/traces/scattergl/strict'),
]);

module.exports = Plotly;
