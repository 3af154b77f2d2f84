pnpm init --init-type module
pnpm add "$SLUICE_TARBALLS/sluice-core-0.1.0.tgz" "$SLUICE_TARBALLS/sluice-next-0.1.0.tgz" next@15.5.29 react@19 react-dom@19
# Next.js 15 does not build with TypeScript 6 or 7: name the 5.x it needs
pnpm add -D typescript@5.9.3 @types/react @types/node@20
