package org.tserve.grpc;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;

import io.grpc.Status;
import org.junit.Test;

public class GrpcStatusMapperTest {
    @Test
    public void mapsHttpStatuses() {
        assertEquals(Status.Code.INVALID_ARGUMENT, GrpcStatusMapper.code(400, "bad"));
        assertEquals(Status.Code.UNAUTHENTICATED, GrpcStatusMapper.code(401, ""));
        assertEquals(Status.Code.PERMISSION_DENIED, GrpcStatusMapper.code(403, ""));
        assertEquals(Status.Code.NOT_FOUND, GrpcStatusMapper.code(404, "Model not found: m"));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, GrpcStatusMapper.code(504, "did not answer"));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, GrpcStatusMapper.code(408, ""));
        assertEquals(Status.Code.ABORTED, GrpcStatusMapper.code(409, ""));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, GrpcStatusMapper.code(413, ""));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, GrpcStatusMapper.code(507, "Out of resources"));
        assertEquals(Status.Code.UNAVAILABLE, GrpcStatusMapper.code(503, "Model \"m\" has no worker to serve inference request"));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, GrpcStatusMapper.code(503, "Model \"m\" version 1 has a full job queue"));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, GrpcStatusMapper.code(503, "Job queue of model m is full; retry later"));
        assertEquals(Status.Code.FAILED_PRECONDITION, GrpcStatusMapper.code(422, ""));
        assertEquals(Status.Code.INTERNAL, GrpcStatusMapper.code(500, "Worker died."));
        assertEquals(Status.Code.OK, GrpcStatusMapper.code(200, ""));
        assertEquals("bad", GrpcStatusMapper.status(400, "bad").getDescription());
    }

    @Test
    public void trailerNamesAreValidMetadataKeys() {
        assertEquals("x-custom", TrailerNames.sanitize("X-Custom"));
        assertEquals("ts_stream_next", TrailerNames.sanitize("ts_stream_next"));
        assertEquals("ts-content-type", TrailerNames.sanitize("Content-Type"));
        assertEquals("ts-grpc-status", TrailerNames.sanitize("grpc-status"));
        assertEquals("a-b", TrailerNames.sanitize("a b"));
        assertNull(TrailerNames.sanitize("data-bin"));
        assertNull(TrailerNames.sanitize(""));
        assertEquals("caf?", TrailerNames.asciiValue("café"));
    }
}
