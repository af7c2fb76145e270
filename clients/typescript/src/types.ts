/**
 * The gateway's request and answer shapes, named from the types generated out of its OpenAPI
 * document (`src/generated/openapi.ts`): when a route's schema changes, `npm run generate`
 * rewrites them and this package's build checks every use.
 */

import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

// Runs
export type StartRun = Schemas["StartRun"];
export type Started = Schemas["Started"];
/** A run waiting in its session's line (`multitask_strategy: "enqueue"` on a busy session). */
export type Queued = Schemas["Queued"];
export type Multitask = Schemas["Multitask"];
export type RunTurn = Schemas["RunTurn"];
export type SessionLine = Schemas["SessionLine"];
export type CancelRun = Schemas["CancelRun"];
export type CancelRunAnswer = Schemas["CancelRunAnswer"];
export type Payload = Schemas["Payload"];
export type AppendBatch = Schemas["AppendBatch"];
export type AppendedEvents = Schemas["AppendedEvents"];
export type ResumeRun = Schemas["ResumeRun"];
export type Resumed = Schemas["Resumed"];
export type RunView = Schemas["RunView"];
export type RunList = Schemas["RunList"];
export type RunEntry = Schemas["RunEntry"];
export type RunStatus = Schemas["RunStatus"];
export type RunEvent = Schemas["Event"];
export type Block = Schemas["Block"];
export type TicketRequest = Schemas["TicketRequest"];
export type Ticket = Schemas["Ticket"];

// Queues and tasks
export type SubmitBody = Schemas["SubmitBody"];
export type Submitted = Schemas["Submitted"];
export type PriorityInput = Schemas["PriorityInput"];
export type RetryPolicy = Schemas["RetryBody"];
export type Task = Schemas["TaskJson"];
export type TaskState = Schemas["TaskState"];
export type Cancelled = Schemas["Cancelled"];
export type CancelAnswer = Schemas["CancelAnswer"];
export type CancelResult = Schemas["CancelResult"];
export type TaskEnd = Schemas["TaskEventJson"];
export type EventsPage = Schemas["EventsPage"];
export type QueueList = Schemas["QueueList"];
export type QueueStats = Schemas["QueueStatsJson"];
export type WaitingTasks = Schemas["WaitingTasks"];
export type InFlightList = Schemas["InFlightList"];
export type DeadLetterList = Schemas["DeadLetterList"];
export type RequeueBody = Schemas["RequeueBody"];
export type Requeued = Schemas["Requeued"];
export type PauseState = Schemas["PauseState"];
export type RateLimit = Schemas["RateLimitBody"];
export type Retention = Schemas["RetentionJson"];
export type RetentionBody = Schemas["RetentionBody"];

// The HTTP worker API
export type ReserveBody = Schemas["ReserveBody"];
export type ReservedTask = Schemas["ReservedTask"];
export type Reservations = Schemas["Reservations"];
export type AckItem = Schemas["AckItem"];
export type AckOutcome = Schemas["AckOutcome"];
export type AckedMany = Schemas["AckedMany"];
export type NackBody = Schemas["NackBody"];
export type Nacked = Schemas["Nacked"];
export type LastError = Schemas["LastErrorJson"];

// Workers and schedules
export type WorkerList = Schemas["WorkerList"];
export type Schedule = Schemas["Schedule"];
export type ScheduleList = Schemas["ScheduleList"];

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
