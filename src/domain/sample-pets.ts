import { PET_STATUSES, type PetStatus } from './pet.js';
import type { PetRecordInput } from './storage.js';

const NAMES = [
  'Biscuit',
  'Luna',
  'Milo',
  'Bella',
  'Charlie',
  'Nala',
  'Oscar',
  'Daisy',
  'Pepper',
  'Simba',
  'Rosie',
  'Ziggy',
  'Mochi',
  'Hazel',
  'Rex',
  'Olive',
  'Tofu',
  'Juniper',
  'Koda',
  'Pixel',
  'Ginger',
  'Waffles',
  'Clover',
  'Bruno',
  'Sushi',
  'Maple',
  'Noodle',
  'Athena',
  'Pumpkin',
  'Ruby',
];
const KINDS = [
  'the beagle',
  'the tabby',
  'the parrot',
  'the rabbit',
  'the hamster',
  'the goldfish',
  'the tortoise',
  'the ferret',
  'the corgi',
  'the cockatiel',
  'the guinea pig',
  'the husky',
];
// Most animals in a store are for sale; a few are reserved or already gone.
const STATUS_WEIGHTS: readonly [PetStatus, number][] = [
  ['available', 0.7],
  ['pending', 0.2],
  ['sold', 0.1],
];

const pick = <T>(items: readonly T[], random: () => number): T =>
  items[Math.floor(random() * items.length)] as T;

/** A plausible animal for demos and benchmarks: "Luna the tabby", category by kind, mostly available. */
export function samplePet(random: () => number = Math.random): PetRecordInput {
  const kind = Math.floor(random() * KINDS.length);
  let roll = random();
  const status =
    STATUS_WEIGHTS.find(([, weight]) => {
      roll -= weight;
      return roll < 0;
    })?.[0] ?? PET_STATUSES[0];
  return { name: `${pick(NAMES, random)} ${KINDS[kind]}`, categoryId: BigInt(kind + 1), status };
}
