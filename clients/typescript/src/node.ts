/// <reference types="node" />
// `@writhq/writ-client/node`: the pending store and the outbox on files,
// for Node. Each write is fsynced before the call that made it returns.
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { Outbox, OutboxEntry, PendingApproval, PendingStore } from './pending.js';

export type { Outbox, OutboxEntry, PendingApproval, PendingStore } from './pending.js';

/** Writes data to file durably: a temporary file, fsynced, renamed over it, the directory fsynced. */
function replaceFile(file: string, data: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally { closeSync(fd); }
  renameSync(tmp, file);
  syncDir(path.dirname(file));
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try { fsyncSync(fd); } finally { closeSync(fd); }
}

function readIfAny(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return '';
    throw err;
  }
}

/**
 * A PendingStore in one JSON file (an object from action digest to
 * pending approval), rewritten whole on each change. One process at a
 * time: two agents need two files.
 */
export class FilePendingStore implements PendingStore {
  readonly file: string;
  constructor(file: string) {
    this.file = path.resolve(file);
    mkdirSync(path.dirname(this.file), { recursive: true });
  }
  private read(): { [action: string]: PendingApproval } {
    const text = readIfAny(this.file);
    return text ? JSON.parse(text) as { [action: string]: PendingApproval } : {};
  }
  get(action: string): PendingApproval | undefined { return this.read()[action]; }
  set(action: string, pending: PendingApproval): void {
    const all = this.read();
    all[action] = pending;
    replaceFile(this.file, JSON.stringify(all));
  }
  delete(action: string): void {
    const all = this.read();
    if (!(action in all)) return;
    delete all[action];
    replaceFile(this.file, JSON.stringify(all));
  }
}

type Line = { op: 'begin'; entry: OutboxEntry } | { op: 'settle'; decision_id: string; report: OutboxEntry['report'] } |
  { op: 'done'; decision_id: string };

/**
 * An Outbox in a file of JSON lines, appended to and fsynced line by line:
 * `begin` before the tool runs, `settle` with the report, `done` when writ
 * took it. Reading folds the lines; a last line cut short by a crash is
 * ignored. `compact` rewrites the file with only what is pending. One
 * process at a time.
 */
export class FileOutbox implements Outbox {
  readonly file: string;
  constructor(file: string) {
    this.file = path.resolve(file);
    mkdirSync(path.dirname(this.file), { recursive: true });
  }
  private append(line: Line): void {
    const fd = openSync(this.file, 'a', 0o600);
    try {
      writeSync(fd, JSON.stringify(line) + '\n');
      fsyncSync(fd);
    } finally { closeSync(fd); }
  }
  async begin(entry: OutboxEntry): Promise<void> { this.append({ op: 'begin', entry }); }
  async settle(decisionId: string, report: OutboxEntry['report']): Promise<void> {
    this.append({ op: 'settle', decision_id: decisionId, report });
  }
  async done(decisionId: string): Promise<void> { this.append({ op: 'done', decision_id: decisionId }); }
  async pending(): Promise<OutboxEntry[]> {
    const open = new Map<string, OutboxEntry>();
    for (const text of readIfAny(this.file).split('\n')) {
      if (!text) continue;
      let line: Line;
      try {
        line = JSON.parse(text) as Line;
      } catch {
        continue; // a line the crash cut short: its write never returned
      }
      if (line.op === 'begin') open.set(line.entry.decision_id, { ...line.entry });
      else if (line.op === 'settle') {
        const e = open.get(line.decision_id);
        if (e) e.report = line.report;
      } else open.delete(line.decision_id);
    }
    return [...open.values()];
  }
  /** Rewrites the file with only the pending entries. */
  async compact(): Promise<void> {
    const lines: Line[] = [];
    for (const e of await this.pending()) {
      const { report, ...entry } = e;
      lines.push({ op: 'begin', entry });
      if (report) lines.push({ op: 'settle', decision_id: e.decision_id, report });
    }
    replaceFile(this.file, lines.map((l) => JSON.stringify(l) + '\n').join(''));
  }
}
