/**
 * What the front ends and the extensions share with the server, below all of them: the
 * {@link org.tserve.server.ServerContext} they are given, the {@link org.tserve.server.ServerExtension} SPI
 * (gRPC, metrics; found with ServiceLoader), the {@link org.tserve.server.ResponseListeners} that hear every
 * answer's status, and the {@link org.tserve.server.ServerVersion}. {@code org.tserve.ModelServer} builds it.
 */
package org.tserve.server;
