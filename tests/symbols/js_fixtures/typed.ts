// TypeScript: types, generics, overloads, abstract members, parameter properties, namespaces.
interface Named {
  name: string;
}

export function pick<T extends object, K extends keyof T>(obj: T, ...keys: K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const key of keys) out[key] = obj[key];
  return out;
}

export function format(value: number): string;
export function format(value: string): string;
export function format(value: number | string): string {
  return typeof value === 'number' ? value.toFixed(2) : value.trim();
}

export const identity = <T,>(value: T): T => value;

abstract class Repository<T extends Named> {
  protected items: T[] = [];
  constructor(private readonly prefix: string, public limit = 10) {}
  abstract validate(item: T): boolean;
  add(this: Repository<T>, item: T): number {
    if (!this.validate(item)) throw new Error(`invalid ${item.name}`);
    return this.items.push(item);
  }
  get names(): string[] {
    return this.items.map((item) => `${this.prefix}${item.name}`);
  }
}

class UserRepository extends Repository<Named> {
  validate(item: Named): boolean {
    return item.name.length > 0;
  }
  async findAsync(name: string): Promise<Named | undefined> {
    return this.items.find((item) => item.name === name);
  }
}

class AuditedRepository extends UserRepository {
  constructor(private readonly log: string[]) {
    super('audited:');
  }
  validate(item: Named): boolean {
    this.log.push(item.name);
    return super.validate(item);
  }
}

namespace Geometry {
  export function distance(a: [number, number], b: [number, number]): number {
    return Math.hypot(a[0] - b[0], a[1] - b[1]);
  }
}

declare function external(value: number): void;

async function main(): Promise<void> {
  const repo = new UserRepository('user:');
  repo.add({ name: 'ada' });
  repo.add({ name: 'alan' });
  console.log(pick({ a: 1, b: 2, c: 3 }, 'a', 'c'), format(3.14159), format('  x  '), identity<number>(5));
  console.log(repo.names, await repo.findAsync('alan'), Geometry.distance([0, 0], [3, 4]));
  const audit: string[] = [];
  new AuditedRepository(audit).add({ name: 'grace' });
  console.log(audit);
  try {
    repo.add({ name: '' });
  } catch (error) {
    console.log('caught:', (error as Error).message);
  }
}

void main();
