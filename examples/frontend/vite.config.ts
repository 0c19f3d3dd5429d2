import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The client package is built from its sources in this workspace (the same code its npm tarball holds).
export default defineConfig({
  plugins: [react()],
  resolve: { conditions: ['@decision-gateway/source'] },
  build: { outDir: 'dist', emptyOutDir: true },
});
