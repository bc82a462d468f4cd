// TSX: components as functions and arrows, props types, callbacks inside JSX.
const React = {
  createElement: (type: unknown, props: unknown, ...children: unknown[]): unknown =>
    typeof type === 'function' ? type(props) : { type, props, children },
};

type Props = { name: string; count?: number };

export function Greeting({ name, count = 1 }: Props) {
  return <p title={name}>{'hi '.repeat(count)}{name}</p>;
}

export const Button = (props: { label: string; onClick?: () => void }) => (
  <button onClick={() => props.onClick?.()}>{props.label}</button>
);

export default function App(): unknown {
  return (
    <div>
      <Greeting name="ada" count={2} />
      <Button label="go" />
    </div>
  );
}

console.log(JSON.stringify(App()));
