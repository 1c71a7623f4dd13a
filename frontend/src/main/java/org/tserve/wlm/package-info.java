/**
 * Workload manager: models and their versions, bounded job queues, batching, and one worker
 * thread per Python backend process. It knows nothing of HTTP or gRPC.
 *
 * <p>API used by the REST ({@code org.tserve.http}) and gRPC ({@code org.tserve.grpc}) front ends:
 * <ul>
 *   <li>{@link org.tserve.wlm.ModelManager}: {@code register(RegisterRequest)},
 *       {@code scale(name, version, min, max, synchronous)}, {@code unregister(name, version)},
 *       {@code setDefault(name, version)}, {@code describe(name, version)}, {@code list(limit, pageToken)},
 *       {@code submit(Job)}, {@code health()}, {@code addListener(WlmListener)}, {@code shutdown()}.
 *       Management calls return a {@link org.tserve.wlm.api.StatusResult} (HTTP-style status + message) or
 *       plain description objects; failures throw {@link org.tserve.wlm.api.WlmException} carrying an
 *       HTTP-style status (400, 403, 404, 405, 409, 500, 503, 507) and a message for the client.</li>
 *   <li>{@link org.tserve.wlm.api.Job}: one request (model, optional version, headers, parts) with a
 *       {@link org.tserve.wlm.api.JobResponder} that receives exactly one final call
 *       ({@code onResult} or {@code onError}), preceded by zero or more {@code onChunk} calls for
 *       streaming handlers. Responder methods run on worker threads: do not block in them.</li>
 * </ul>
 *
 * <p>Inside, the rooms: {@code supervision} (worker threads and processes, scaling, restarts), {@code batching}
 * (batches to and responses from a worker), {@code registry} (models and versions), {@code sequences} (stateful
 * sequences), {@code multinode} (leader and member nodes), {@code protocol} (the frame codec) and
 * {@code workflow}. Only this package's classes are the API; the rooms are public to each other, not to
 * {@code http} or {@code grpc}.
 */
package org.tserve.wlm;
