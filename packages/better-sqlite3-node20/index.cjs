// Installed on Node.js 20 only (engines): the 12.x line of better-sqlite3, from this package's own node_modules.
module.exports = require('better-sqlite3');
