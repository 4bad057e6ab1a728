import { defineConfig } from "vitest/config";

// Django serves frontend/dist/index.html at /, /c/<id>, ... and frontend/dist/assets/ at /assets/.
// With base "/" and the default assetsDir "assets", index.html references /assets/<file>.
const backend = process.env.PRISM_BACKEND ?? "http://127.0.0.1:8000";

export default defineConfig({
  base: "/",
  build: { outDir: "dist", assetsDir: "assets", emptyOutDir: true, chunkSizeWarningLimit: 2000 },
  worker: { format: "es" },
  server: {
    proxy: {
      "/api": backend,
      "/ws": { target: backend.replace(/^http/, "ws"), ws: true },
    },
  },
  test: { include: ["tests/**/*.test.ts"], environment: "node" },
});
