import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.net.InetSocketAddress;

/**
 * The frontend bound (docs/benchmarks.md, "The physical bound"): the least an HTTP server on the
 * frontend's own Netty (the classes inside tserve-frontend.jar) can do for the echo cell's request —
 * the same event loop groups and codec/aggregator pipeline as tserve's REST server, every POST
 * answered 200 with a fixed one-byte body, no worker behind it. Compiled and started by
 * benchmarks/bound.py; never part of the server jar.
 *
 *     java -cp tserve-frontend.jar:CLASSES FrontendBound PORT
 */
public final class FrontendBound {
    private static final byte[] BODY = {'x'};

    private FrontendBound() {
    }

    public static void main(String[] args) throws InterruptedException {
        int port = Integer.parseInt(args[0]);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(Runtime.getRuntime().availableProcessors());   // tserve's number_of_netty_threads default
        ServerBootstrap b = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(6_553_500),
                                new Answer());
                    }
                });
        b.bind(new InetSocketAddress("127.0.0.1", port)).sync();
        System.out.println("bound ready on " + port);
        System.out.flush();
        boss.terminationFuture().sync();
    }

    private static final class Answer extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            FullHttpResponse res = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
                    Unpooled.wrappedBuffer(BODY));
            res.headers().set(HttpHeaderNames.CONTENT_TYPE, "application/octet-stream");
            HttpUtil.setContentLength(res, BODY.length);
            boolean keepAlive = HttpUtil.isKeepAlive(req);
            HttpUtil.setKeepAlive(res, keepAlive);
            if (keepAlive) {
                ctx.writeAndFlush(res, ctx.voidPromise());
            } else {
                ctx.writeAndFlush(res).addListener(ChannelFutureListener.CLOSE);
            }
        }
    }
}
