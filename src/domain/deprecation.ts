/**
 * getPet is deprecated (RFC 9745) and retired at its sunset (RFC 8594): from that instant on it answers
 * 410. The clock is passed in so tests can stand on either side of the instant.
 */
export const GET_PET_DEPRECATED_AT = new Date('2026-11-01T00:00:00Z');
export const GET_PET_SUNSET = new Date('2030-12-05T00:00:00Z');

export function isRetired(now: Date, sunset: Date = GET_PET_SUNSET): boolean {
  return now.getTime() >= sunset.getTime();
}
