# escape=`
FROM mcr.microsoft.com/windows/servercore:ltsc2022
ARG A=b
RUN echo `
  %A%
COPY ["src dir", "C:\\dst"]
ENV X=${A:+set} Y="${A%%b}"
LABEL a=b c="d e"
