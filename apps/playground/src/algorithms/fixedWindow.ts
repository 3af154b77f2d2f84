/** The fixed window's column: `limit` per `window`. @module */
import { fixedWindow } from "@sluice/core";
import { windowAlgorithm } from "./definition.js";

export const fixedWindowColumn = windowAlgorithm("Fixed window", fixedWindow);
