import { defineConfig } from 'tsdown';

// The published build: ESM and CommonJS with one bundled declaration file each. The workspace's
// own packages (the contract, and the gateway's router type) are devDependencies, so tsdown
// inlines what the client uses of them. The dependencies stay external: @trpc/client at run time,
// and for the declarations @trpc/server (the router type) and zod (the contract's types are
// inferred from its schemas). `eager` builds declarations for the inlined workspace sources too.
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  platform: 'neutral',
  target: 'es2022',
  dts: { tsconfig: './tsconfig.build.json', eager: true },
  sourcemap: false,
  clean: true,
  publint: false,
});
