/**
 * The workload manager's API types, everything the front ends ({@code http}, {@code grpc}), the workflows and
 * the metrics exchange with it besides the {@code org.tserve.wlm.ModelManager} facade: a request
 * ({@link org.tserve.wlm.api.Job} with its {@link org.tserve.wlm.api.Header}s and {@link org.tserve.wlm.api.Part}s,
 * answered through a {@link org.tserve.wlm.api.JobResponder} with {@link org.tserve.wlm.api.Response}s), the
 * management parameters and answers ({@link org.tserve.wlm.api.RegisterRequest},
 * {@link org.tserve.wlm.api.StatusResult}, {@link org.tserve.wlm.api.WlmException}), the describe records, the
 * {@link org.tserve.wlm.api.Health} and the {@link org.tserve.wlm.api.WlmListener} that metrics implement.
 * The bottom of wlm's stack: it imports no other wlm package, and every wlm room may use it.
 */
package org.tserve.wlm.api;
