// Async functions and generators (generators are indexed, not wrapped).
async function loadUser(id) {
  if (id < 0) throw new TypeError(`bad id ${id}`);
  await null;
  return { id, name: `user${id}` };
}

const loadAll = async (ids) => Promise.all(ids.map((id) => loadUser(id)));

function* countTo(n) {
  for (let i = 1; i <= n; i++) yield i;
}

async function* ticks(n) {
  for (const i of countTo(n)) yield i * 10;
}

const api = {
  async fetch(key) {
    return `value of ${key}`;
  },
  *entries() {
    yield* [['a', 1], ['b', 2]];
  },
};

(async () => {
  console.log(await loadUser(1), await loadAll([2, 3]));
  try {
    await loadUser(-1);
  } catch (error) {
    console.log('rejected:', error.name, error.message);
  }
  const seen = [];
  for await (const tick of ticks(3)) seen.push(tick);
  console.log(seen, [...countTo(2)], await api.fetch('k'), [...api.entries()]);
})();
