pnpm init --init-type module
pnpm add "$SLUICE_TARBALLS/sluice-core-0.1.0.tgz" "$SLUICE_TARBALLS/sluice-next-0.1.0.tgz" next@16.4.6 react@19 react-dom@19
pnpm add -D typescript@5.9.3 @types/react @types/node@20
