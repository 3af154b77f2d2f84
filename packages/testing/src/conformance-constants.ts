/** 2026-01-01T00:00:00Z: a multiple of every window the suite uses, so windows start on it. */
export const T0 = 1_767_225_600_000;
