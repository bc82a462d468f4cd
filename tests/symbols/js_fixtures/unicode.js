// Ünïcödé before functions: “quotes”, emoji 🎉🚀 and CJK 日本語 shift UTF-8 byte offsets away from characters.
const greeting = '¡Hola! 👋 Grüß Gott';

function shout(text) { return `${text}!!! ✨`; }

const wave = (name) => `👋 ${name} — ${greeting}`;

class Café {
  brew(size) { return `☕ ${size}`; }
}

console.log(shout('señor'), wave('Zoë'), new Café().brew('grande'));
