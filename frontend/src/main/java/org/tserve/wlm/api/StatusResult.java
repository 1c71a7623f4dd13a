package org.tserve.wlm.api;

/** The outcome of a management call: HTTP-style status and the message TorchServe would send. */
public record StatusResult(int status, String message) {
}
