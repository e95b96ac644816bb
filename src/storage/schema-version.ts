import { VERSION } from '../version.js';

/**
 * A database whose schema is newer than this build knows: a newer release migrated it, and this one is
 * a rollback. Such a build never serves or migrates it: it would write through tables and constraints it
 * does not know (a NOT NULL column it leaves empty, a status it does not check). Start and `migrate`
 * fail with this one line, which names both versions.
 */
export class SchemaTooNewError extends Error {
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(
      `the database schema is at version ${found}, newer than the version ${known} this build (petstore ${VERSION}) knows: ` +
        'a newer release migrated it; run that release again, or restore the backup taken before the upgrade',
    );
    this.name = 'SchemaTooNewError';
  }
}

/** Throws SchemaTooNewError when the database's schema version is beyond the migrations this build has. */
export function assertSchemaKnown(found: number, known: number): void {
  if (found > known) throw new SchemaTooNewError(found, known);
}
