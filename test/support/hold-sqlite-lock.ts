/**
 * Another process holding a SQLite database's write lock: `node --import tsx hold-sqlite-lock.ts <path>`
 * takes the lock (BEGIN IMMEDIATE), says "locked" on stdout, and lets it go when its stdin ends.
 */
import { BetterSqlite3 } from '../../src/storage/sqlite/driver.js';

const db = new BetterSqlite3(process.argv[2] as string);
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked\n');
process.stdin.resume();
process.stdin.on('end', () => {
  db.exec('ROLLBACK');
  db.close();
});
