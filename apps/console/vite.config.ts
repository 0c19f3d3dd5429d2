import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Served by the gateway under /console (its console door), as static files with a strict CSP: no
// inline script, so Vite's module preload polyfill (an inline script) is off.
export default defineConfig({
  base: '/console/',
  plugins: [react()],
  resolve: { conditions: ['@decision-gateway/source'] },
  // One bundle for an operators' page: Recharts makes it larger than Vite's warning threshold.
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1200,
  },
});
