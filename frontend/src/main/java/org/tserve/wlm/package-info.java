/**
 * Workload manager: models and their versions, bounded job queues, batching, and one worker
 * thread per Python backend process. It knows nothing of HTTP or gRPC.
 *
 * <p>This package is the facade, {@link org.tserve.wlm.ModelManager}: {@code register(RegisterRequest)},
 * {@code scale(name, version, min, max, synchronous)}, {@code unregister(name, version)},
 * {@code setDefault(name, version)}, {@code describe(name, version)}, {@code list(limit, pageToken)},
 * {@code submit(Job)}, {@code health()}, {@code addListener(WlmListener)}, {@code memberJobs()},
 * {@code shutdown()}. With the types of {@code org.tserve.wlm.api} (the {@code Job} and its headers, parts,
 * responder and responses, the management parameters and answers, {@code WlmException} with an HTTP-style
 * status) it is all that the front ends ({@code http}, {@code grpc}), the workflows and the metrics use.
 *
 * <p>Inside, the rooms form a one-way stack, each using only those below it (LayeringTest checks it):
 * {@code api} ← {@code protocol} (the frame codec) ← {@code link} (the sockets to a backend) ←
 * {@code batching} (batches to and answers from a worker) ← {@code supervision} (worker threads and
 * processes, scaling, restarts, a worker's part in a job across machines) ← {@code sequences} (stateful
 * sequences) ← {@code registry} (models and versions) ← {@code multinode} (a member node's parts of its
 * leaders' jobs) ← this facade. No room calls back into the facade: a worker is given a
 * {@code WorkerContext}, a model sees its workers as {@code Worker}s, a worker its model as a
 * {@code ServedModel}, batching sees a {@code BatchModel}.
 */
package org.tserve.wlm;
