package org.tserve.grpc;

import java.util.List;
import org.tserve.server.ServerContext;
import org.tserve.server.ServerExtension;

/** Starts the gRPC inference and management servers with the server and stops them at shutdown. */
public final class GrpcExtension implements ServerExtension {
    private GrpcServers servers;
    private String inferenceAddress;
    private String managementAddress;

    @Override
    public void start(ServerContext ctx) throws Exception {
        servers = GrpcServers.start(ctx.config(), ctx.modelManager(), ctx.tokens(), ctx.responses());
        String scheme = ctx.config().getBool("enable_grpc_ssl") ? "https" : "http";
        inferenceAddress = scheme + "://" + ctx.config().get("grpc_inference_address") + ":" + servers.inferencePort();
        managementAddress = scheme + "://" + ctx.config().get("grpc_management_address") + ":" + servers.managementPort();
    }

    @Override
    public void stop() {
        if (servers != null) {
            servers.stop();
            servers = null;
        }
    }

    @Override
    public List<String> bannerLines() {
        return List.of("gRPC inference address: " + inferenceAddress, "gRPC management address: " + managementAddress);
    }
}
