import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may connect: public addresses only. Every range of the IANA IPv4 and IPv6
 * special-purpose address registries that is not globally reachable is refused (loopback, private,
 * CGNAT, link-local with cloud metadata at 169.254.169.254, unique-local, documentation, benchmarking,
 * discard, ORCHID, SRv6 SIDs, the deprecated site-local range), and multicast, reserved, broadcast and
 * unspecified addresses, unless an operator lets a network in (WEBHOOK_ALLOWED_NETWORKS). Checked on the
 * address actually connected to, after DNS resolution.
 *
 * IPv6 forms that carry an IPv4 address: an IPv4-mapped address (`::ffff:a.b.c.d`, how a dual-stack
 * socket names an IPv4 peer) is the IPv4 address itself, judged as such. Every other form is refused
 * whole, whatever it carries: IPv4-compatible (`::/96`, deprecated), SIIT (`::ffff:0:0:0/96`), NAT64
 * (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 (`2002::/16`) and Teredo (`2001::/32`). A translator reaches
 * what its configuration says, not necessarily the address it carries (a local-use NAT64 prefix or a
 * Teredo relay may lead anywhere), so decoding them would trust the network's set-up; a deployment that
 * must reach the Internet through NAT64 lets that prefix in with WEBHOOK_ALLOWED_NETWORKS.
 */
const REFUSED_V4 = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments (its two anycast /32s included: no webhook receiver)
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated): a relay, not a receiver
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address 255.255.255.255
] as const;

const REFUSED_V6 = [
  ['::', 96], // IPv4-compatible (deprecated), with :: (unspecified) and ::1 (loopback) in it
  ['::ffff:0:0:0', 96], // SIIT: an IPv4 address in disguise
  ['64:ff9b::', 96], // NAT64: an IPv4 address in disguise
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['100:0:0:1::', 64], // dummy prefix (RFC 9780)
  // IETF protocol assignments: Teredo 2001::/32, benchmarking, ORCHID and ORCHIDv2 among them; its few
  // globally reachable parts are anycast services and identifiers, never a webhook receiver
  ['2001::', 23],
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: an IPv4 address in disguise
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // SRv6 SIDs
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const;

const refused = new BlockList();
for (const [address, prefix] of REFUSED_V4) refused.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of REFUSED_V6) refused.addSubnet(address, prefix, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (`isIP` said it is one), its zone index dropped. */
function groupsOf(address: string): number[] {
  let text = address.split('%')[0] as string;
  // A dotted IPv4 tail is two groups.
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
    text = `${dotted[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string | undefined) =>
    part ? part.split(':').map((group) => Number.parseInt(group, 16)) : [];
  const front = parse(head);
  const back = parse(tail);
  return tail === undefined ? front : [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
}

/**
 * The address to judge: an IPv4 address as it is; an IPv6 one in full form (no zone index), or, when it
 * is IPv4-mapped (`::ffff:127.0.0.1`, `::ffff:7f00:1`), the IPv4 address it carries. Undefined for what
 * is not an IP address.
 */
function judged(ip: string): { address: string; family: 'ipv4' | 'ipv6' } | undefined {
  const version = isIP(ip);
  if (version === 4) return { address: ip, family: 'ipv4' };
  if (version !== 6) return undefined;
  const groups = groupsOf(ip);
  const [high, low] = [groups[6] as number, groups[7] as number];
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff)
    return { address: `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, family: 'ipv4' };
  return { address: groups.map((group) => group.toString(16)).join(':'), family: 'ipv6' };
}

/** A CIDR list as WEBHOOK_ALLOWED_NETWORKS gives it; throws naming the entry that is not one. */
export function parseNetworks(list: string): BlockList {
  const networks = new BlockList();
  for (const entry of list.split(',').map((part) => part.trim())) {
    if (entry === '') continue;
    const match = /^([^/]+)\/(\d{1,3})$/.exec(entry);
    const family = match ? isIP(match[1] as string) : 0;
    const prefix = Number(match?.[2]);
    if (!match || family === 0 || prefix > (family === 4 ? 32 : 128))
      throw new Error(`"${entry}" is not a network in CIDR notation (such as 127.0.0.0/8 or fd00::/8)`);
    networks.addSubnet(match[1] as string, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return networks;
}

export class NetworkPolicy {
  readonly #allowed: BlockList;

  constructor(allowed: BlockList = new BlockList()) {
    this.#allowed = allowed;
  }

  /** Whether a webhook may connect to this IP address. */
  permits(ip: string): boolean {
    const address = judged(ip);
    if (address === undefined) return false;
    // An allowed IPv4 network lets in that network's IPv4-mapped forms too (BlockList compares them).
    if (this.#allowed.check(address.address, address.family)) return true;
    return !refused.check(address.address, address.family);
  }
}
