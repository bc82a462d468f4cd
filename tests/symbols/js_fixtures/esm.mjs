// ES modules: exports, default export, top-level await, import.meta.
import { basename } from 'node:path';

export function fileName() {
  return basename(new URL(import.meta.url).pathname);
}

export const delay = (ms, value) => new Promise((resolve) => setTimeout(() => resolve(value), ms));

export async function fetchTwice(key) {
  const first = await delay(1, key);
  const second = await delay(1, first + '!');
  return [first, second];
}

export default async (x) => (await delay(1, x)) * 3;

console.log(fileName(), await fetchTwice('k'));
import(import.meta.url).then((self) => self.default(7)).then((tripled) => console.log('tripled', tripled));
