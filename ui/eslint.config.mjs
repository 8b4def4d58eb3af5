// ESLint: typescript-eslint strict + angular-eslint (components and
// templates, including its accessibility rules).
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';
import angular from 'angular-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.angular/', 'e2e/out/'] },
  {
    files: ['src/**/*.ts'],
    extends: [eslint.configs.recommended, ...tseslint.configs.strict, ...angular.configs.tsRecommended],
    processor: angular.processInlineTemplates,
    rules: {
      '@angular-eslint/directive-selector': ['error', { type: 'attribute', prefix: 'cairn', style: 'camelCase' }],
      '@angular-eslint/component-selector': ['error', { type: 'element', prefix: 'cairn', style: 'kebab-case' }],
    },
  },
  {
    files: ['src/**/*.html'],
    extends: [...angular.configs.templateRecommended, ...angular.configs.templateAccessibility],
    rules: {
      // Clarity's clr-*-container associates labels with their inputs.
      '@angular-eslint/template/label-has-associated-control': 'off',
    },
  },
  {
    files: ['e2e/**/*.mjs', 'scripts/**/*.mjs'],
    extends: [eslint.configs.recommended],
    languageOptions: {
      globals: { console: 'readonly', process: 'readonly', URL: 'readonly', setTimeout: 'readonly', window: 'readonly', document: 'readonly' },
    },
  },
);
