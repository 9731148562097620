/*
 * examples/http_response.h - the one response of examples/http-server,
 * shared with tests/conn_load, which checks it byte for byte.
 */
#ifndef WEFT_EXAMPLES_HTTP_RESPONSE_H
#define WEFT_EXAMPLES_HTTP_RESPONSE_H

#define HTTP_HELLO_RESPONSE \
	"HTTP/1.1 200 OK\r\n" \
	"Server: weft-example\r\n" \
	"Content-Type: text/plain\r\n" \
	"Content-Length: 13\r\n" \
	"\r\n" \
	"Hello, World!"

#endif
