/** The root of the repository. */
export declare const ROOT_DIR: string;
/** The programs `pnpm run typecheck` checks, in order (as `tsc -p` takes them). */
export declare const PROJECTS: readonly string[];
/** TypeScript 7's `tsc`; throws, naming the command to run, when it is not installed. */
export declare function tscPath(): string;
/** Checks one program with TypeScript 7 (`tsc -p <project> --noEmit`): its exit code and what it printed. */
export declare function typecheck(project: string): Promise<{ code: number | null; output: string }>;
