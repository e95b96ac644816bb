import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may connect: public addresses only. Loopback, private (RFC 1918), CGNAT, link-local
 * (cloud metadata at 169.254.169.254 among them), unique-local, multicast, reserved and unspecified
 * addresses are refused, in IPv4, IPv6 and IPv4-mapped IPv6 forms, unless an operator lets a network
 * in (WEBHOOK_ALLOWED_NETWORKS). Checked on the address actually connected to, after DNS resolution.
 */
const REFUSED_V4 = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address
] as const;

const REFUSED_V6 = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['64:ff9b::', 96], // NAT64: an IPv4 address in disguise
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: an IPv4 address in disguise
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const;

const refused = new BlockList();
for (const [address, prefix] of REFUSED_V4) refused.addSubnet(address, prefix, 'ipv4');
for (const [address, prefix] of REFUSED_V6) refused.addSubnet(address, prefix, 'ipv6');

/** `::ffff:127.0.0.1` (and its hex form) is 127.0.0.1: judged as the IPv4 address it carries. */
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  if (isIP(address) === 4) return { address, family: 'ipv4' };
  const mapped = /^(?:0{0,4}:){0,5}:?ffff:(.+)$/i.exec(address);
  if (mapped?.[1]) {
    const tail = mapped[1];
    if (isIP(tail) === 4) return { address: tail, family: 'ipv4' };
    const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(tail);
    if (hex) {
      const [high, low] = [Number.parseInt(hex[1] as string, 16), Number.parseInt(hex[2] as string, 16)];
      return { address: `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, family: 'ipv4' };
    }
  }
  return { address, family: 'ipv6' };
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
    const { address, family } = unmapped(ip);
    if (this.#allowed.check(address, family) || this.#allowed.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4'))
      return true;
    return !refused.check(address, family);
  }
}
