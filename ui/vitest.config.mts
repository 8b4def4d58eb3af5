import { transformAsync } from '@babel/core';
import { createEs2015LinkerPlugin } from '@angular/compiler-cli/linker/babel';
import { ConsoleLogger, LogLevel, NodeJSFileSystem } from '@angular/compiler-cli';
import { defineConfig, type Plugin } from 'vitest/config';

// Clarity ships partially compiled (ɵɵngDeclare*); the CLI build links it
// ahead of time. The unit tests run in JIT without the CLI, so they link
// Clarity the same way (Angular's own linker) as vitest loads it.
function angularLinker(): Plugin {
  const linker = createEs2015LinkerPlugin({
    fileSystem: new NodeJSFileSystem(),
    logger: new ConsoleLogger(LogLevel.warn),
    linkerJitMode: true,
  });
  return {
    name: 'cairn-angular-linker',
    async transform(code, id) {
      if (!/node_modules\/@clr\//.test(id) || !code.includes('ɵɵngDeclare')) {
        return null;
      }
      const out = await transformAsync(code, { filename: id, plugins: [linker], compact: false, sourceMaps: false, configFile: false, babelrc: false });
      return out?.code ? { code: out.code, map: null } : null;
    },
  };
}

// Unit tests: pure logic and the API service; components with Angular's
// TestBed (JIT) in jsdom.
export default defineConfig({
  plugins: [angularLinker()],
  test: {
    globals: true,
    environment: 'jsdom',
    include: ['src/**/*.spec.ts'],
    setupFiles: ['src/test-setup.ts'],
    testTimeout: 20_000,
    server: { deps: { inline: [/@clr\/angular/] } },
    pool: 'threads',
    poolOptions: { threads: { maxThreads: 2, minThreads: 1 } },
  },
  esbuild: { target: 'es2022' },
});
