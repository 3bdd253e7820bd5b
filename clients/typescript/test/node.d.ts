// The few Node APIs the end-to-end test uses, declared here so type-checking needs nothing
// but `typescript` (no @types/node).

declare const process: {
  env: Record<string, string | undefined>;
  exitCode: number | undefined;
};

declare module "node:net" {
  interface Socket {
    write(data: string): boolean;
    on(event: "data", listener: (chunk: Uint8Array) => void): this;
    on(event: "end" | "close", listener: () => void): this;
    on(event: "error", listener: (error: Error) => void): this;
  }
  export function connect(port: number, host: string): Socket;
}
