package org.tserve.grpc;

import io.grpc.Status;
import java.util.Locale;

/**
 * HTTP-style statuses (from the workload manager or the handler) → gRPC status codes. Differs
 * from TorchServe where TorchServe is unhelpful: an unknown model is NOT_FOUND (not INTERNAL),
 * a full job queue is RESOURCE_EXHAUSTED, timeouts are DEADLINE_EXCEEDED.
 */
public final class GrpcStatusMapper {
    private GrpcStatusMapper() {
    }

    public static Status.Code code(int httpStatus, String message) {
        switch (httpStatus) {
            case 400:
                return Status.Code.INVALID_ARGUMENT;
            case 401:
                return Status.Code.UNAUTHENTICATED;
            case 403:
                return Status.Code.PERMISSION_DENIED;
            case 404:
                return Status.Code.NOT_FOUND;
            case 408:
            case 504:
                return Status.Code.DEADLINE_EXCEEDED;
            case 409:
                return Status.Code.ABORTED;
            case 413:
            case 429:
            case 507:
                return Status.Code.RESOURCE_EXHAUSTED;
            case 416:
                return Status.Code.OUT_OF_RANGE;
            case 499:
                return Status.Code.CANCELLED;
            case 501:
                return Status.Code.UNIMPLEMENTED;
            case 503:
                return isQueueFull(message) ? Status.Code.RESOURCE_EXHAUSTED : Status.Code.UNAVAILABLE;
            default:
                if (httpStatus >= 200 && httpStatus < 300) {
                    return Status.Code.OK;
                }
                return httpStatus >= 400 && httpStatus < 500 ? Status.Code.FAILED_PRECONDITION : Status.Code.INTERNAL;
        }
    }

    /** The gRPC status for an HTTP-style failure, with the message as its description. */
    public static Status status(int httpStatus, String message) {
        return Status.fromCode(code(httpStatus, message)).withDescription(message);
    }

    /** The workload manager answers a full job queue with 503 and a message saying so. */
    static boolean isQueueFull(String message) {
        if (message == null) {
            return false;
        }
        String m = message.toLowerCase(Locale.ROOT);
        return m.contains("queue") && m.contains("full");
    }
}
