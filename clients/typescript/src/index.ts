// @egressgate/client: egressgate's control API from TypeScript. `Client` has one method per
// operation of the OpenAPI document, named after its operationId (`openTurn`,
// `requestApproval`, `resumeInterrupt`, ...) and typed with its schemas; every non-2xx answer
// throws `ApiError` (`status`, `code`, `message`); the chat event stream is an async iterable.

export { ApiError, type ClientOptions, type Op, type ServerSentEvent } from "./core.js";
export { Client, OPERATIONS } from "./operations.js";
export type * from "./schemas.js";
