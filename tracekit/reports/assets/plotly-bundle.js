// The entry point of tracekit's partial plotly.js bundle (plotly.min.js beside it): plotly.js's
// core (which holds the scatter trace) and the other trace types tracekit's charts draw.
// build_plotly.sh bundles it; tests/reports/test_plotly_bundle.py checks that every trace type
// the charts use is registered in the bundle.
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/box'), require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
