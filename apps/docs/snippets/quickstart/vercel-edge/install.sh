pnpm add "$SLUICE_TARBALLS/sluice-redis-0.1.0.tgz" @upstash/redis
