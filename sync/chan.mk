# channels and select (issue 3).
libweft_la_SOURCES += sync/chan.c
weftinclude_HEADERS += include/weft/chan.h
