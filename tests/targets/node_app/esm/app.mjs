import { square, Shape } from "./geometry.mjs";

const shape = new Shape(3);
console.log("square", square(4));
console.log("area", shape.area());
